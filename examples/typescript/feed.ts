// Upload a stock feed, follow it until it is processed, save the rows it
// dropped, then read the order events that are new since the last run.
//
//   node dist/feed.js stock.csv
//
// STORELINK_URL (default http://127.0.0.1:8080), STORELINK_CLIENT_ID and
// STORELINK_API_KEY say where and who; STORELINK_CURSOR is the event cursor
// the last run printed (none: from the first event).
import { readFile, writeFile } from "node:fs/promises";
import { basename } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import createClient from "openapi-fetch";
import type { paths } from "./storelink-api.js";

const client_id = setting("STORELINK_CLIENT_ID");
const api = createClient<paths>({
  baseUrl: process.env.STORELINK_URL || "http://127.0.0.1:8080",
  headers: { "x-api-key": setting("STORELINK_API_KEY") },
});

// 1. Upload the file. Its body is the CSV itself, sent as it is: by
// default openapi-fetch sends every body as JSON (Content-Type
// application/json, which this call answers with 415).
const path = process.argv[2] ?? "stock.csv";
const file = basename(path);
const upload = await api.PUT("/stock/{client_id}/{file}", {
  params: { path: { client_id, file } },
  headers: { "Content-Type": "text/csv" },
  body: await readFile(path, "utf8"),
  bodySerializer: (csv) => csv,
});
if (!upload.data) throw failed("upload", upload);
const { upload_id } = upload.data;
console.log(`upload ${upload_id}: ${upload.data.status}`);

// 2. Follow it until it is processed: accepted, processing, then applied
// or rejected. A small file takes a second or two.
let report = await status();
for (let i = 1; report.status === "accepted" || report.status === "processing"; i++) {
  if (i > 600) throw new Error(`upload ${upload_id} is still ${report.status} after 10 minutes`);
  await sleep(1000);
  report = await status();
}
console.log(
  `${report.status}: ${report.rows_applied} of ${report.rows_total} rows applied, ${report.rows_rejected} rejected`,
);

// 3. Save the rows it dropped, under the file's own header with their line
// and problem, to fix and send again. The answer is CSV, not JSON: read it
// as text.
if (report.has_errors || report.status === "rejected") {
  const errors = await api.GET("/stock/{client_id}/uploads/{upload_id}/errors.csv", {
    params: { path: { client_id, upload_id } },
    parseAs: "text",
  });
  if (errors.data === undefined) throw failed("errors.csv", errors);
  const saved = file.replace(/\.csv$/i, "") + "-errors.csv";
  await writeFile(saved, errors.data);
  console.log(`dropped rows saved in ${saved}`);
}

// 4. The order events since the last run, oldest first, a page at a time.
// A page shorter than the limit is the end for now; keep its next_cursor
// and start after it the next time.
let after = process.env.STORELINK_CURSOR || undefined;
for (let page = 0; page < 1000; page++) {
  const events = await api.GET("/events/{client_id}", {
    params: { path: { client_id }, query: { after, limit: 100 } },
  });
  if (!events.data) throw failed("events", events);
  for (const e of events.data.events) {
    console.log(`event ${e.event_id}: order ${e.order_number} ${e.state}`);
  }
  after = events.data.next_cursor ?? after;
  if (events.data.events.length < 100) break;
}
console.log(`cursor ${after ?? "none"}`);

async function status() {
  const got = await api.GET("/stock/{client_id}/uploads/{upload_id}", {
    params: { path: { client_id, upload_id } },
  });
  if (!got.data) throw failed("upload status", got);
  return got.data;
}

function setting(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name}`);
  return value;
}

// An answer other than 2xx: its status and problem (JSON, with a detail).
function failed(what: string, answer: { error?: unknown; response: Response }): Error {
  return new Error(`${what}: ${answer.response.status} ${JSON.stringify(answer.error)}`);
}
