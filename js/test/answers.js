// Answers of the reader to a list of queries, each as the objects of the ``zs`` command's ``--json`` lines:
// the tests send the same list to Python's command line and compare. Shared by Node and the browser.

/**
 * All items of an async iterator.
 * @template T @param {AsyncIterable<T>} items @returns {Promise<T[]>}
 */
async function all(items) {
  const out = [];
  for await (const item of items) out.push(item);
  return out;
}

/**
 * The answer to one query: ``{ok: [json lines]}`` or ``{error: its class, message}``.
 * @param {import("../src/archive/repoarchive.js").RepoArchive} archive @param {Record<string, any>} q
 */
export async function answer(archive, q) {
  try {
    return { ok: await run(archive, q) };
  } catch (err) {
    return { error: err.name, message: err.message };
  }
}

/** @param {import("../src/archive/repoarchive.js").RepoArchive} archive @param {Record<string, any>} q */
async function run(archive, q) {
  switch (q.q) {
    case "refs": return archive.refs();
    case "log": return archive.log(q.ref ?? null, { since: q.since, until: q.until, maxCount: q.max_count ?? null });
    case "graph": return (await archive.graph({ ref: q.ref ?? null, all: Boolean(q.all) })).filter((line) => "id" in line);
    case "show": return [await archive.show(q.ref)];
    case "ls": return archive.ls(q.ref, q.path ?? null);
    case "chunks": return all(archive.chunkRefs(q.ref, q.path));
    case "chunk": return [await archive.chunkRef(q.ref, q.path, q.coords)];
    case "chunk-log": return archive.chunkLog(q.ref, q.path, q.coords);
    case "diff": return archive.diff(q.from, q.to, { stat: Boolean(q.stat) });
    case "ops": return archive.ops({ since: q.since, until: q.until });
    case "summary": return [await archive.summary()];
    case "chain": return archive.chain();
    default: throw new Error(`no query ${q.q}`);
  }
}

/**
 * Every answer, in order, as JSON text (a BigInt as a string, to fail loudly in a comparison).
 * @param {import("../src/archive/repoarchive.js").RepoArchive} archive @param {Array<Record<string, any>>} plan
 */
export async function answerAll(archive, plan) {
  const out = [];
  for (const q of plan) out.push(await answer(archive, q));
  return JSON.stringify(out, (_, value) => (typeof value === "bigint" ? value.toString() : value));
}
