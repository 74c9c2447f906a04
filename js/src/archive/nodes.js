// Queries of the node tree of one snapshot: every node, one node, one array.
import { NotFound } from "../errors.js";
import { HistoryQueries } from "./history.js";
import { hint } from "./refspec.js";
import { ARRAY, GROUP, NODE, pathComponents, pathOf } from "./schema.js";

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * A group or array of one snapshot; ``snapshotId`` and ``since`` say where an array's chunk refs are.
 * @typedef {object} NodeInfo
 * @property {string} path
 * @property {"group" | "array"} nodeType
 * @property {string} id
 * @property {any} zarrJson the parsed zarr.json (the writer's: never checked)
 * @property {Uint8Array} userData its bytes exactly as stored
 * @property {string} snapshotId
 * @property {number[]} [shape]
 * @property {number[]} [numChunks]
 * @property {any[] | null} [dimensionNames]
 * @property {any} [dtype]
 * @property {number[] | null} [chunkShape]
 * @property {Array<{manifestId: string, extents: Array<[number, number]>}>} [manifests]
 * @property {string | null} [since]
 */

/**
 * An array's data type (its name, for an extension type) and regular chunk grid's chunk shape, as its
 * zarr.json states them (null for what it does not state).
 * @param {any} zarrJson
 * @returns {[string | null, number[] | null]}
 */
function dtypeAndChunks(zarrJson) {
  if (zarrJson === null || typeof zarrJson !== "object" || Array.isArray(zarrJson)) return [null, null];
  let dtype = zarrJson.data_type;
  if (dtype !== null && typeof dtype === "object" && !Array.isArray(dtype)) dtype = dtype.name;
  const grid = zarrJson.chunk_grid;
  const config = grid !== null && typeof grid === "object" && !Array.isArray(grid) ? grid.configuration : undefined;
  const shape = config !== null && typeof config === "object" && !Array.isArray(config) ? config.chunk_shape : undefined;
  const ok = Array.isArray(shape) && shape.every((n) => Number.isInteger(n));
  return [typeof dtype === "string" ? dtype : null, ok ? shape : null];
}

/**
 * The row of ``zs ls --json`` for a node.
 * @param {NodeInfo} node
 */
export function lsRow(node) {
  /** @type {Record<string, unknown>} */
  const row = { path: node.path, node_type: node.nodeType, id: node.id, zarr_json: node.zarrJson };
  if (node.nodeType === "array") {
    Object.assign(row, { shape: node.shape, num_chunks: node.numChunks, dimension_names: node.dimensionNames,
      dtype: node.dtype, chunk_shape: node.chunkShape });
  }
  return row;
}

/** The groups and arrays of a snapshot, with their zarr.json, shape and where their chunk refs are. */
export class NodeQueries extends HistoryQueries {
  /**
   * @param {string} snapshotId @param {any[]} components @param {any[]} value
   * @returns {NodeInfo}
   */
  nodeInfo(snapshotId, components, value) {
    if (value.length < 6 || typeof value[0] !== "string" || value[0].length !== 13 || ![GROUP, ARRAY].includes(value[1]) ||
        !(value[2] instanceof Uint8Array) || !components.every((c) => typeof c === "string")) {
      throw new TypeError(`node record of ${pathOf(components)} in ${snapshotId}`);
    }
    const [nodeId, nodeType, userData, shape, dimensionNames, manifests] = value;
    const path = pathOf(components);
    const zarrJson = JSON.parse(utf8.decode(userData));
    if (nodeType === GROUP) return { path, nodeType: "group", id: nodeId, zarrJson, userData, snapshotId };
    const dims = /** @type {any[]} */ (shape).map((dim) => {
      const [arrayLength, chunkLength, numChunks] = dim;
      const chunks = numChunks !== null ? numChunks : chunkLength ? Math.ceil(arrayLength / chunkLength) : 0;
      return [arrayLength, chunks];
    });
    const [dtype, chunkShape] = dtypeAndChunks(zarrJson);
    return {
      path, nodeType: "array", id: nodeId, zarrJson, userData, snapshotId,
      shape: dims.map(([n]) => n), numChunks: dims.map(([, c]) => c),
      dimensionNames: dimensionNames === null ? null : [.../** @type {any[]} */ (dimensionNames)],
      dtype, chunkShape,
      manifests: /** @type {any[]} */ (manifests).map(([manifestId, extents]) => ({ manifestId, extents })),
      since: value.length > 6 ? /** @type {string | null} */ (value[6]) : null,
    };
  }

  /**
   * Every node of the snapshot REF names (``path`` and what is under it, if given), in the archive's order.
   * @param {string} ref @param {string | null} [path]
   * @returns {Promise<NodeInfo[]>}
   */
  async nodeInfos(ref, path = null) {
    const sid = await this.resolve(ref);
    const out = [];
    for await (const [key, value] of this.records(NODE, [sid])) out.push(this.nodeInfo(sid, /** @type {any[]} */ (key[1]), value));
    if (path === null || path.replace(/^\/+|\/+$/g, "") === "") return out;
    const top = (await this.nodeAt(sid, path, ref)).path;
    return out.filter((node) => node.path === top || node.path.startsWith(top + "/"));
  }

  /** ``zs ls REF [PATH] --json``. @param {string} ref @param {string | null} [path] */
  async ls(ref, path = null) {
    return (await this.nodeInfos(ref, path)).map(lsRow);
  }

  /** @param {string} snapshotId @param {string} path @param {string} ref */
  async nodeAt(snapshotId, path, ref) {
    const components = pathComponents(path.startsWith("/") ? path : "/" + path);
    const value = await this.one(NODE, [snapshotId, components]);
    if (value === null) {
      const paths = [];
      for await (const [key] of this.records(NODE, [snapshotId])) paths.push(pathOf(/** @type {string[]} */ (key[1])));
      throw new NotFound(`${this.name}: no node ${JSON.stringify(pathOf(components))} at ${JSON.stringify(ref)}${hint(paths, "paths")}`);
    }
    return this.nodeInfo(snapshotId, components, value);
  }

  /** The group or array at ``path`` in the snapshot REF names. @param {string} ref @param {string} path */
  async node(ref, path) {
    return this.nodeAt(await this.resolve(ref), path, ref);
  }

  /** @param {string} ref @param {string} path */
  async arrayAt(ref, path) {
    const node = await this.node(ref, path);
    if (node.nodeType !== "array") throw new NotFound(`${this.name}: ${JSON.stringify(node.path)} at ${JSON.stringify(ref)} is a group, not an array`);
    return node;
  }
}
