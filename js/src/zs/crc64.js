// CRC-64 as the .xz format computes it (ZS v0.10: poly 0x42f0e1eba9ea3693, reflected, init and xorout
// all ones): eight bytes a step through eight tables ("slicing-by-8"), each 64-bit entry in two 32-bit
// halves (BigInt arithmetic per byte is ~50x slower).

const SLICES = 8;
const LO = Array.from({ length: SLICES }, () => new Uint32Array(256));
const HI = Array.from({ length: SLICES }, () => new Uint32Array(256));
for (let n = 0; n < 256; n++) {
  // the reflected polynomial 0xc96c5795d7870f42, as halves
  let lo = n, hi = 0;
  for (let k = 0; k < 8; k++) {
    const carry = lo & 1;
    lo = ((lo >>> 1) | ((hi & 1) << 31)) >>> 0;
    hi = hi >>> 1;
    if (carry) {
      lo = (lo ^ 0xd7870f42) >>> 0;
      hi = (hi ^ 0xc96c5795) >>> 0;
    }
  }
  LO[0][n] = lo;
  HI[0][n] = hi;
}
for (let k = 1; k < SLICES; k++) {  // table k: the CRC of a byte followed by k zero bytes
  for (let n = 0; n < 256; n++) {
    const lo = LO[k - 1][n], hi = HI[k - 1][n], t = lo & 0xff;
    LO[k][n] = (((lo >>> 8) | (hi << 24)) ^ LO[0][t]) >>> 0;
    HI[k][n] = ((hi >>> 8) ^ HI[0][t]) >>> 0;
  }
}
const [L0, L1, L2, L3, L4, L5, L6, L7] = LO;
const [H0, H1, H2, H3, H4, H5, H6, H7] = HI;

/**
 * The CRC-64-xz of ``data`` as [low 32 bits, high 32 bits].
 * @param {Uint8Array} data
 * @returns {[number, number]}
 */
export function crc64(data) {
  let lo = 0xffffffff, hi = 0xffffffff;
  const n = data.length;
  const words = new DataView(data.buffer, data.byteOffset, n);
  let i = 0;
  for (; i + 8 <= n; i += 8) {
    const a = (lo ^ words.getUint32(i, true)) >>> 0;
    const b = (hi ^ words.getUint32(i + 4, true)) >>> 0;
    lo = L7[a & 0xff] ^ L6[(a >>> 8) & 0xff] ^ L5[(a >>> 16) & 0xff] ^ L4[a >>> 24] ^
      L3[b & 0xff] ^ L2[(b >>> 8) & 0xff] ^ L1[(b >>> 16) & 0xff] ^ L0[b >>> 24];
    hi = H7[a & 0xff] ^ H6[(a >>> 8) & 0xff] ^ H5[(a >>> 16) & 0xff] ^ H4[a >>> 24] ^
      H3[b & 0xff] ^ H2[(b >>> 8) & 0xff] ^ H1[(b >>> 16) & 0xff] ^ H0[b >>> 24];
  }
  for (; i < n; i++) {
    const t = (lo ^ data[i]) & 0xff;
    lo = ((lo >>> 8) | (hi << 24)) ^ L0[t];
    hi = (hi >>> 8) ^ H0[t];
  }
  return [(~lo) >>> 0, (~hi) >>> 0];
}

/**
 * A u64 as the 0x-prefixed 16-digit hex messages show.
 * @param {number} lo
 * @param {number} hi
 */
export function hex64(lo, hi) {
  return "0x" + hi.toString(16).padStart(8, "0") + lo.toString(16).padStart(8, "0");
}
