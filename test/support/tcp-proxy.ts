// The TCP proxy lives with the scripts (npm run chaos injects faults with it too); tests import it from here.
export { startTcpProxy, type TcpProxy } from "../../scripts/lib/tcp-proxy.js";
