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
  /** One chunk ref from a freshly opened archive: the answer and the requests opening and asking cost. @param {string} url @param {string} ref @param {string} path @param {number[]} coords */
  async lookup(url, ref, path, coords) {
    const archive = await openArchive(url);
    const opened = archive.zs.transport.stats.requests;
    const first = await archive.chunkRef(ref, path, coords);
    const cold = archive.zs.transport.stats.requests - opened;
    await archive.chunkRef(ref, path, coords);
    const again = archive.zs.transport.stats.requests - opened - cold;
    return { chunk: first, open: opened, cold, again, depth: archive.zs.rootIndexLevel };
  },
});
document.body.dataset.ready = "true";
