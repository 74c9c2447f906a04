// The reader in a browser page, for the tests: ``runPlan`` answers a plan of queries as Node does
// (answers.js), ``readArray`` reads an array of a snapshot through zarrita and the archive store,
// ``lookup`` asks one chunk ref and reports the requests it cost.
import { openArchive, openStore } from "../src/index.js";
import { answerAll } from "./answers.js";

/** @type {Map<string, import("../src/archive/repoarchive.js").RepoArchive>} */
const open = new Map();

/** @param {string} url @param {string[]} [authorize] */
async function archiveAt(url, authorize = []) {
  const key = JSON.stringify([url, authorize]);
  if (!open.has(key)) open.set(key, await openArchive(url, { authorize }));
  return /** @type {any} */ (open.get(key));
}

Object.assign(window, {
  /** @param {string} url @param {any[]} plan @param {string[]} authorize */
  async runPlan(url, plan, authorize) {
    try {
      return await answerAll(await archiveAt(url, authorize), plan);
    } catch (err) {
      return JSON.stringify({ open_error: err.name, message: err.message });
    }
  },
  /** The array's values (numbers; BigInt as numbers) at REF, through zarrita. @param {string} url @param {string} ref @param {string} path @param {string | null} repo */
  async readArray(url, ref, path, repo) {
    const zarr = await import("zarrita");
    const store = await openStore(await archiveAt(url), ref, { repo });
    const array = await zarr.open(zarr.root(store).resolve(path.replace(/^\//, "")), { kind: "array" });
    const got = await zarr.get(array);
    const data = typeof got === "object" && got !== null && "data" in got ? Array.from(got.data) : [got];
    return { shape: got.shape ?? [], data: data.map((x) => (typeof x === "bigint" ? Number(x) : x)) };
  },
  /**
   * One chunk ref from a freshly opened archive, a record family at a time, and the requests each step cost:
   * opening, the ref (B), the array's node (N), its snapshot's history (S), its chunk refs (C), and asking again.
   * @param {string} url @param {string} ref @param {string} path @param {number[]} coords
   */
  async lookup(url, ref, path, coords) {
    const archive = await openArchive(url);
    const zs = /** @type {import("../src/zs/reader.js").ZS} */ (archive.zs);
    const requests = () => zs.transport.stats.requests;
    const steps = { open: requests() };
    let before = requests();
    const step = (/** @type {string} */ name) => {
      steps[name] = requests() - before;
      before = requests();
    };
    const sid = await archive.resolve(ref);
    step("refs");
    const node = await archive.node(ref, path);
    step("nodes");
    await archive.historyDepths(sid);
    step("history");
    const chunk = await archive.arrayChunk(node, coords);
    step("chunks");
    await archive.chunkRef(ref, path, coords);
    step("again");
    return { steps, chunk: chunk && { ...chunk, inline: null }, depth: zs.rootIndexLevel, history: (await archive.historyDepths(sid)).size };
  },
});
document.body.dataset.ready = "true";
