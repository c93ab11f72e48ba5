// cluster-key-slot (the slot function ioredis itself uses) ships no types: the one function read here.
declare module "cluster-key-slot" {
  /** The Redis Cluster hash slot (0..16383) of a key, its hash tag's if it has one. */
  export default function calculateSlot(key: string | Buffer): number;
}
