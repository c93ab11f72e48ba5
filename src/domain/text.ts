// Text users send: refused when it holds what no client types on purpose and what
// the stores would mangle or refuse (PostgreSQL rejects a NUL byte in text with an
// error; a lone UTF-16 surrogate is silently replaced on the way to UTF-8).
import { badInput } from "../errors.js";

/** C0 controls, DEL and C1 controls. */
// eslint-disable-next-line no-control-regex -- finding control characters is this pattern's purpose
const controlCharacter = /[\u0000-\u001F\u007F-\u009F]/;
/** The same, less tab, line feed and carriage return, which multi-line text keeps. */
// eslint-disable-next-line no-control-regex -- as above
const controlCharacterBesidesLineBreaks = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]/;
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Throws BAD_USER_INPUT naming `field` when `value` holds a control character
 * (tab, line feed and carriage return are allowed when `multiline`) or is not
 * well-formed Unicode.
 */
export function checkPlainText(field: string, value: string, options: { readonly multiline?: boolean } = {}): void {
  const pattern = options.multiline ? controlCharacterBesidesLineBreaks : controlCharacter;
  const found = pattern.exec(value);
  if (found) {
    const codePoint = `U+${found[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
    const allowed = options.multiline ? " (tab and line breaks are allowed)" : "";
    throw badInput(field, `${field} must not contain control characters${allowed}; found ${codePoint} at position ${found.index}.`);
  }
  if (loneSurrogate.test(value)) {
    throw badInput(field, `${field} must be well-formed Unicode; it holds half of a UTF-16 surrogate pair.`);
  }
}
