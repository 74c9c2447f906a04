// A least-recently-used cache bounded by the total weight of its values (a Map keeps insertion order).

export class LRUCache {
  /** @param {number} capacity */
  constructor(capacity) {
    this.capacity = capacity;
    this.weight = 0;
    /** @type {Map<unknown, [unknown, number]>} */
    this.data = new Map();
  }

  /** The value kept for ``key`` (now the most recently used), or undefined. @param {unknown} key */
  get(key) {
    const item = this.data.get(key);
    if (item === undefined) return undefined;
    this.data.delete(key);
    this.data.set(key, item);
    return item[0];
  }

  /**
   * Keep ``value`` (a value heavier than the whole capacity is not kept), then evict the least
   * recently used entries down to the capacity.
   * @param {unknown} key @param {unknown} value @param {number} [weight]
   */
  put(key, value, weight = 1) {
    if (weight > this.capacity) return;
    const old = this.data.get(key);
    if (old !== undefined) {
      this.weight -= old[1];
      this.data.delete(key);
    }
    this.data.set(key, [value, weight]);
    this.weight += weight;
    for (const [oldest, [, w]] of this.data) {
      if (this.weight <= this.capacity) break;
      this.data.delete(oldest);
      this.weight -= w;
    }
  }

  clear() {
    this.data.clear();
    this.weight = 0;
  }
}
