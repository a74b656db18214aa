// Strict-JSON helpers the parsers share: JSON.parse silently keeps the last of duplicate keys, so a
// strict API looks for them itself. Iterative (deep nesting cannot overflow the stack), never throws.

/** Decodes a JSON string literal (with its quotes); falls back to the raw text if it is not one. */
function decodeKey(literal: string): string {
  try {
    const v: unknown = JSON.parse(literal);
    return typeof v === 'string' ? v : literal;
  } catch {
    return literal;
  }
}

/**
 * The first key that appears twice in one object of a JSON text (compared after unescaping, so
 * `"a"` and `"\u0061"` are the same key), or null. Meant for text JSON.parse accepted; on anything
 * else it still returns (a key or null) without throwing.
 */
export function findDuplicateKey(text: string): string | null {
  // One entry per open container: the keys seen so far for an object, null for an array.
  const stack: Array<Set<string> | null> = [];
  let expectKey = false;
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const start = i++;
      let escaped = false;
      while (i < n) {
        const d = text.charCodeAt(i);
        if (d === 0x5c /* \ */) {
          escaped = true;
          i += 2;
          continue;
        }
        if (d === 0x22) break;
        i++;
      }
      const end = Math.min(i, n); // index of the closing quote (or the end of a broken text)
      i = end + 1;
      if (expectKey) {
        expectKey = false;
        const keys = stack[stack.length - 1];
        if (keys) {
          const key = escaped ? decodeKey(text.slice(start, end + 1)) : text.slice(start + 1, end);
          if (keys.has(key)) return key;
          keys.add(key);
        }
      }
      continue;
    }
    if (c === 0x7b /* { */) {
      stack.push(new Set());
      expectKey = true;
    } else if (c === 0x5b /* [ */) {
      stack.push(null);
      expectKey = false;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
      expectKey = false;
    } else if (c === 0x2c /* , */) {
      expectKey = stack.length > 0 && stack[stack.length - 1] !== null;
    } else if (c === 0x3a /* : */) {
      expectKey = false;
    }
    i++;
  }
  return null;
}
