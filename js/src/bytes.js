// Byte buffers: pieces joined, and a stream read whole but never past a bound.

/**
 * The pieces one after another, in one buffer (the piece itself when there is one).
 * @param {Uint8Array[]} parts
 * @returns {Uint8Array}
 */
export function concat(parts) {
  if (parts.length === 1) return parts[0];
  const out = new Uint8Array(parts.reduce((n, part) => n + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/**
 * Everything a stream yields, as one buffer; ``tooMuch()`` is thrown (the stream cancelled) as soon as it
 * passes ``limit`` bytes, so no more than the limit and one piece is ever held.
 * @param {ReadableStream<Uint8Array>} stream @param {number} limit @param {() => Error} tooMuch
 * @returns {Promise<Uint8Array>}
 */
export async function readBounded(stream, limit, tooMuch) {
  const reader = stream.getReader();
  const parts = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return concat(parts);
    total += value.length;
    if (total > limit) {
      await reader.cancel();
      throw tooMuch();
    }
    parts.push(value);
  }
}
