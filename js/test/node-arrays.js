// node node-arrays.js ARCHIVE REF REPO AUTHORIZE PATH...: each array's values at REF read through zarrita
// (native chunks the archive does not embed from the repository REPO, virtual ones under the prefix
// AUTHORIZE; "-" for none), as JSON: path -> flat list (BigInt as numbers), or the error's one line.
import * as zarr from "zarrita";
import { openArchive, openStore } from "../src/index.js";

const [source, ref, repo, authorize, ...paths] = process.argv.slice(2);
const archive = await openArchive(source, { authorize: authorize === "-" ? [] : [authorize] });
const store = await openStore(archive, ref, { repo: repo === "-" ? null : repo });
/** @type {Record<string, unknown[]>} */
const out = {};
for (const path of paths) {
  try {
    const array = await zarr.open(zarr.root(store).resolve(path.replace(/^\//, "")), { kind: "array" });
    const got = await zarr.get(array);
    const data = typeof got === "object" && got !== null && "data" in got ? Array.from(got.data) : [got];
    out[path] = data.map((x) => (typeof x === "bigint" ? Number(x) : x));
  } catch (err) {
    out[path] = [`${err.name}: ${err.message}`];
  }
}
process.stdout.write(JSON.stringify(out));
