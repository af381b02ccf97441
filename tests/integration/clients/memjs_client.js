// memjs 1.3.2 (binary protocol only) against a server: set N keys, read
// them all back, increment with an initial value, delete, stats (its
// version), flush. Prints one JSON line of named results.
//   node memjs_client.js PORT N
const path = require("path");
const modules = process.env.NODE_PATH || "";
const memjs = require(modules ? path.join(modules, "memjs") : "memjs");

const port = process.argv[2];
const n = parseInt(process.argv[3] || "1000", 10);
const client = memjs.Client.create("127.0.0.1:" + port, {
  retries: 0, timeout: 10, conntimeout: 5, logger: { log: () => {} },
});

function value(i) {
  let v = "";
  for (let j = 0; j < 10 + (i * 131) % 1000; j++) v += String.fromCharCode(33 + (i * 7 + j * 13) % 94);
  return v;
}

async function main() {
  const res = {};
  const keys = [];
  for (let i = 0; i < n; i++) keys.push("memjs:" + String(i).padStart(6, "0"));
  let setFail = 0;
  for (let i = 0; i < n; i++) {
    if (!(await client.set(keys[i], value(i), { expires: 0 }))) setFail++;
  }
  res.set_failed = setFail;
  let bad = 0;
  for (let i = 0; i < n; i++) {
    const r = await client.get(keys[i]);
    if (!r.value || r.value.toString() !== value(i)) bad++;
  }
  res.get_wrong = bad;
  const inc1 = await client.increment("memjs:ctr", 5, { initial: 7 });
  const inc2 = await client.increment("memjs:ctr", 5, {});
  res.incr = [inc1.value, inc2.value];
  res.delete = await client.delete(keys[0]);
  res.after_delete = (await client.get(keys[0])).value;
  res.version = await new Promise((ok) =>
    client.stats((err, server, stats) => ok(err ? String(err) : stats.version)));
  await new Promise((ok) => client.flush(() => ok()));
  res.after_flush = (await client.get(keys[1])).value;
  client.quit();
  console.log(JSON.stringify(res));
}

main().catch((e) => { console.log(JSON.stringify({ error: String(e) })); process.exit(1); });
