// Byte buffers: pieces joined, a stream read whole but never past a bound, or read up to a length it announced.

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

/**
 * The bytes of a stream that announced ``length`` of them, returned as soon as they are all there, not when
 * the stream then says it ended (in a browser that comes as one more message from the network process);
 * fewer if it ends early, ``tooMuch()`` thrown (the stream cancelled) if it holds more.
 * @param {ReadableStream<Uint8Array>} stream @param {number} length @param {() => Error} tooMuch
 * @returns {Promise<Uint8Array>}
 */
export async function readAnnounced(stream, length, tooMuch) {
  const reader = stream.getReader();
  const out = new Uint8Array(length);
  let got = 0;
  while (got < length) {
    const { done, value } = await reader.read();
    if (done) return out.subarray(0, got);
    if (got + value.length > length) {
      await reader.cancel();
      throw tooMuch();
    }
    out.set(value, got);
    got += value.length;
  }
  reader.releaseLock();
  return out;
}
