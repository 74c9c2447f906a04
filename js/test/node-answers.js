// node node-answers.js ARCHIVE PLAN.json [AUTHORIZE...]: the reader's answers to the plan's queries, as JSON.
import { readFile } from "node:fs/promises";
import { openArchive } from "../src/index.js";
import { answerAll } from "./answers.js";

const [source, planPath, ...authorize] = process.argv.slice(2);
const plan = JSON.parse(await readFile(planPath, "utf8"));
let archive;
try {
  archive = await openArchive(source, { authorize });
} catch (err) {
  process.stdout.write(JSON.stringify({ open_error: err.name, message: err.message }));
  process.exit(0);
}
process.stdout.write(await answerAll(archive, plan));
await archive.close();
