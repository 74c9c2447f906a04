// node node-session.js: the reader driven one JSON command per line on stdin, one JSON answer per line on
// stdout, so a test can change the world between two reads: {"open": source, "authorize": [...], "timeout": ms}
// opens an archive (answering the requests it cost), {"query": {...}} answers as answers.js does.
import { createInterface } from "node:readline";
import { openArchive } from "../src/index.js";
import { answer } from "./answers.js";

/** @type {import("../src/archive/repoarchive.js").RepoArchive | null} */
let archive = null;
for await (const line of createInterface({ input: process.stdin })) {
  const command = JSON.parse(line);
  let reply;
  if ("open" in command) {
    try {
      archive = await openArchive(command.open, { authorize: command.authorize ?? [], timeout: command.timeout });
      reply = { ok: true, requests: /** @type {any} */ (archive.zs).transport.stats.requests };
    } catch (err) {
      reply = { error: err.name, message: err.message };
    }
  } else {
    reply = await answer(/** @type {any} */ (archive), command.query);
  }
  process.stdout.write(JSON.stringify(reply, (_, v) => (typeof v === "bigint" ? v.toString() : v)) + "\n");
}
