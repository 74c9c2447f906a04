// CRC-64 as the .xz format computes it (ZS v0.10: poly 0x42f0e1eba9ea3693, reflected, init and xorout
// all ones), in two 32-bit halves (BigInt arithmetic per byte is ~50x slower).

const LO = new Uint32Array(256);
const HI = new Uint32Array(256);
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
  LO[n] = lo;
  HI[n] = hi;
}

/**
 * The CRC-64-xz of ``data`` as [low 32 bits, high 32 bits].
 * @param {Uint8Array} data
 * @returns {[number, number]}
 */
export function crc64(data) {
  let lo = 0xffffffff, hi = 0xffffffff;
  for (let i = 0; i < data.length; i++) {
    const t = (lo ^ data[i]) & 0xff;
    lo = ((lo >>> 8) | (hi << 24)) ^ LO[t];
    hi = (hi >>> 8) ^ HI[t];
  }
  return [(~lo) >>> 0, (~hi) >>> 0];
}

/**
 * A u64 as the 0x-prefixed 16-digit hex messages show.
 * @param {number} lo
 * @param {number} hi
 * @returns {string}
 */
export function hex64(lo, hi) {
  return "0x" + hi.toString(16).padStart(8, "0") + lo.toString(16).padStart(8, "0");
}
