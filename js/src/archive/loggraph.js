// The snapshot tree drawn as text, git style: one line per snapshot, lanes of ``|`` between them
// (zsarchive/archive/read/loggraph.py, line for line).

const CELL = 2;

/**
 * @typedef {{id: string, parent_id: string | null, flushed_at: string, column?: number}} Row
 */

/**
 * Python's order of ``(tuple(-ord(c) for c in flushed_at), id)``: the newest first, then the smaller id.
 * @param {Row} a @param {Row} b
 */
function readyOrder(a, b) {
  const x = a.flushed_at || "", y = b.flushed_at || "";
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) {
    const cx = /** @type {number} */ (x.codePointAt(i)), cy = /** @type {number} */ (y.codePointAt(i));
    if (cx !== cy) return cy - cx;
  }
  if (x.length !== y.length) return x.length - y.length;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** A binary heap ordered by readyOrder. */
class Ready {
  constructor() {
    /** @type {Row[]} */
    this.items = [];
  }

  /** @param {Row} row */
  push(row) {
    const items = this.items;
    items.push(row);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (readyOrder(items[i], items[parent]) >= 0) break;
      [items[i], items[parent]] = [items[parent], items[i]];
      i = parent;
    }
  }

  pop() {
    const items = this.items;
    const top = items[0];
    const last = /** @type {Row} */ (items.pop());
    if (items.length) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1, r = l + 1;
        let best = i;
        if (l < items.length && readyOrder(items[l], items[best]) < 0) best = l;
        if (r < items.length && readyOrder(items[r], items[best]) < 0) best = r;
        if (best === i) break;
        [items[i], items[best]] = [items[best], items[i]];
        i = best;
      }
    }
    return top;
  }
}

/**
 * Snapshots with every child before its parent, the newest ready one first (git's --topo-order).
 * @param {Row[]} snapshots
 */
export function topoOrder(snapshots) {
  const rows = new Map(snapshots.map((s) => [s.id, s]));
  const children = new Map([...rows.keys()].map((id) => [id, 0]));
  for (const s of rows.values()) {
    if (s.parent_id !== null && rows.has(s.parent_id)) children.set(s.parent_id, /** @type {number} */ (children.get(s.parent_id)) + 1);
  }
  const ready = new Ready();
  for (const [id, s] of rows) if (children.get(id) === 0) ready.push(s);
  const out = [];
  while (ready.items.length) {
    const row = ready.pop();
    out.push(row);
    const parent = row.parent_id;
    if (parent !== null && rows.has(parent)) {
      const left = /** @type {number} */ (children.get(parent)) - 1;
      children.set(parent, left);
      if (left === 0) ready.push(/** @type {Row} */ (rows.get(parent)));
    }
  }
  return out;
}

/**
 * ``[graph text, snapshot or null]`` per line for snapshots in topoOrder; a line joining lanes has no
 * snapshot. Each snapshot's ``column`` is set.
 * @param {Row[]} ordered
 * @returns {Array<[string, Row | null]>}
 */
export function layout(ordered) {
  const present = new Set(ordered.map((s) => s.id));
  /** @type {Array<string | null>} */
  const lanes = [];
  const out = [];
  for (const snapshot of ordered) {
    const sid = snapshot.id;
    const waiting = [];
    lanes.forEach((want, i) => {
      if (want === sid) waiting.push(i);
    });
    if (waiting.length > 1) {
      out.push([join(lanes, waiting), null]);
      for (const i of waiting.slice(1)) lanes[i] = null;
    }
    let column;
    if (waiting.length) {
      column = waiting[0];
    } else {
      column = lanes.indexOf(null);
      if (column < 0) {
        column = lanes.length;
        lanes.push(null);
      }
    }
    snapshot.column = column;
    out.push([line(lanes, column), snapshot]);
    const parent = snapshot.parent_id;
    lanes[column] = parent !== null && present.has(parent) ? parent : null;
    while (lanes.length && lanes[lanes.length - 1] === null) lanes.pop();
  }
  return /** @type {Array<[string, Row | null]>} */ (out);
}

/** @param {Array<string | null>} lanes @param {number} column */
function line(lanes, column) {
  return lanes.map((want, i) => (i === column ? "*" : want !== null ? "|" : " ")).join(" ").trimEnd();
}

/** The line where the lanes ``waiting[1:]`` bend into lane ``waiting[0]``. @param {Array<string | null>} lanes @param {number[]} waiting */
function join(lanes, waiting) {
  const chars = new Array(CELL * lanes.length).fill(" ");
  const rest = waiting.slice(1);
  lanes.forEach((want, i) => {
    if (want !== null && !rest.includes(i)) chars[CELL * i] = "|";
  });
  const target = waiting[0];
  for (const i of rest) {
    for (let pos = CELL * target + 1; pos < CELL * i - 1; pos++) if (chars[pos] === " ") chars[pos] = "_";
    chars[CELL * i - 1] = "/";
  }
  return chars.join("").trimEnd();
}
