// The error families of the reader, as in the Python package: ZSError (a usage error, an unsupported
// request), ZSCorrupt (the bytes are wrong: the message names the file, the offset or the record) and
// NotFound (a ref, path, chunk or snapshot the archive does not have).

/** A usage error or an unsupported request. */
export class ZSError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "ZSError";
  }
}

/** Bytes that are wrong: the message names the file, the offset or the record. */
export class ZSCorrupt extends ZSError {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "ZSCorrupt";
  }
}

/** A ref, path, chunk or snapshot that the archive does not have. */
export class NotFound extends ZSError {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "NotFound";
  }
}

/**
 * ``err`` as a ZSError: itself, or ZSCorrupt naming ``name`` for a TypeError or RangeError (what
 * decoding a record of the wrong shape raises before any check of ours names it).
 * @param {string} name
 * @param {unknown} err
 * @returns {unknown}
 */
export function asZSError(name, err) {
  if (err instanceof TypeError || err instanceof RangeError) {
    return new ZSCorrupt(`${name}: a record of the wrong shape (${err.name}: ${err.message})`);
  }
  return err;
}
