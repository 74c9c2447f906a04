// Block payload codecs: none, deflate (the platform's raw deflate decoder), zstd (the vendored fzstd
// decoder) and, refused with a clear message, lzma. Each decodes at most MAX_BLOCK bytes: a payload
// that claims or makes more is refused before much more than that is held.
import { ZSCorrupt, ZSError } from "../errors.js";
import { concat, readBounded } from "../bytes.js";
import { MAX_BLOCK, tooLarge } from "../limits.js";
import { Decompress } from "../vendor/fzstd.js";

/** The most a raw deflate stream can expand: 258 bytes per match of at least one bit. */
const DEFLATE_MAX_RATIO = 1032;

/** Header codec names -> decoders (``lzma2;dsize=2^20`` is known to the format, refused by this reader). */
export const CODECS = {
  none: async (/** @type {Uint8Array} */ data) => data,
  deflate: inflate,
  "lzma2;dsize=2^20": null,
  zstd: unzstd,
};

/**
 * The decoder of a header's codec; ZSError for lzma, which no browser decodes natively.
 * @param {string} codec
 * @param {string} name the file, for the message
 * @returns {(data: Uint8Array, where: string) => Promise<Uint8Array>}
 */
export function decoderFor(codec, name) {
  const decode = CODECS[codec];
  if (!decode) {
    throw new ZSError(`${name}: its blocks are compressed with ${codec}, which the JavaScript reader does not ` +
      "support (zsarchive in Python reads it; export the archive with --codec deflate or zstd for the web)");
  }
  return async (data, where) => {
    try {
      return await decode(data);
    } catch (err) {
      if (err instanceof ZSError) throw new ZSCorrupt(`${where}: payload does not decompress: ${err.message}`);
      throw new ZSCorrupt(`${where}: payload does not decompress: ${err && err.message ? err.message : err}`);
    }
  };
}

/**
 * The bytes of a raw deflate stream made of stored blocks only (what an archive's chunk pieces are),
 * or null for any other stream: those go to the platform's decoder.
 * @param {Uint8Array} data
 * @returns {Uint8Array | null}
 */
function storedDeflate(data) {
  const parts = [];
  let pos = 0;
  while (pos + 5 <= data.length) {
    const final = data[pos];
    const size = data[pos + 1] | (data[pos + 2] << 8);
    if (final > 1 || (size ^ (data[pos + 3] | (data[pos + 4] << 8))) !== 0xffff) return null;
    pos += 5 + size;
    if (pos > data.length) return null;
    parts.push(data.subarray(pos - size, pos));
    if (final) return pos === data.length ? concat(parts) : null;
  }
  return null;
}

/**
 * Decode a whole raw deflate stream (nothing may follow it).
 * @param {Uint8Array} data
 * @returns {Promise<Uint8Array>}
 */
async function inflate(data) {
  const stored = storedDeflate(data);
  if (stored !== null) return stored;
  const inflater = new DecompressionStream("deflate-raw");
  const writer = inflater.writable.getWriter();
  writer.write(/** @type {any} */ (data)).catch(() => undefined);  // a failure surfaces on the readable side
  writer.close().catch(() => undefined);
  if (data.length * DEFLATE_MAX_RATIO <= MAX_BLOCK) {
    // it cannot decode past the ceiling: one read of the whole (a loop of pieces costs twice as much)
    return new Uint8Array(await new Response(inflater.readable).arrayBuffer());
  }
  return readBounded(inflater.readable, MAX_BLOCK, () => new ZSError(tooLarge(MAX_BLOCK)));
}

/**
 * What a zstd frame header declares: [content size or -1, window size].
 * @param {Uint8Array} data
 * @returns {[number, number]}
 */
function zstdFrame(data) {
  if (data.length < 6 || data[0] !== 0x28 || data[1] !== 0xb5 || data[2] !== 0x2f || data[3] !== 0xfd) {
    throw new ZSError("not a zstd frame");
  }
  const descriptor = data[4];
  const sizeFlag = descriptor >> 6, single = (descriptor >> 5) & 1, dictFlag = descriptor & 3;
  let pos = 5;
  let window = 0;
  if (!single) {
    const exponent = data[pos] >> 3, mantissa = data[pos] & 7;
    const base = 2 ** (10 + exponent);
    window = base + (base / 8) * mantissa;
    pos += 1;
  }
  pos += [0, 1, 2, 4][dictFlag];
  const width = [single ? 1 : 0, 2, 4, 8][sizeFlag];
  if (pos + width > data.length) throw new ZSError("zstd frame header is truncated");
  let size = -1;
  if (width) {
    size = 0;
    for (let i = width - 1; i >= 0; i--) size = size * 256 + data[pos + i];
    if (width === 2) size += 256;
  }
  return [size, single ? size : window];
}

/**
 * Decode one zstd frame of at most MAX_BLOCK bytes; a frame that declares more (content or window)
 * is refused unread, one that makes more is stopped as it passes the ceiling.
 * @param {Uint8Array} data
 * @returns {Promise<Uint8Array>}
 */
async function unzstd(data) {
  const [declared, window] = zstdFrame(data);
  if (declared > MAX_BLOCK || window > MAX_BLOCK) throw new ZSError(tooLarge(MAX_BLOCK));
  const pieces = [];
  let total = 0;
  const decoder = new Decompress((piece) => {
    total += piece.length;
    if (total > MAX_BLOCK) throw new ZSError(tooLarge(MAX_BLOCK));
    pieces.push(piece);
  });
  const step = 4096;  // compressed bytes pushed at a time: each makes at most a few MiB
  for (let at = 0; at < data.length; at += step) {
    decoder.push(data.subarray(at, at + step), at + step >= data.length);
  }
  if (declared >= 0 && total !== declared) {
    throw new ZSError(`the frame declares ${declared} bytes and holds ${total}`);
  }
  return concat(pieces);
}
