// memjs 1.3.2 with SASL PLAIN (username/password): set and get one key.
// Prints one JSON line: {"get": VALUE or null, "error": MESSAGE or null}.
//   node memjs_sasl.js PORT USER PASSWORD
const path = require("path");
const modules = process.env.NODE_PATH || "";
const memjs = require(modules ? path.join(modules, "memjs") : "memjs");

const [port, username, password] = process.argv.slice(2);
const client = memjs.Client.create("127.0.0.1:" + port, {
  username, password, retries: 0, timeout: 5, conntimeout: 5, logger: { log: () => {} },
});

async function main() {
  const res = { get: null, error: null };
  try {
    await client.set("sasl:key", "sasl-value", { expires: 0 });
    const got = await client.get("sasl:key");
    res.get = got.value === null ? null : got.value.toString();
  } catch (e) {
    res.error = String(e && e.message ? e.message : e);
  }
  console.log(JSON.stringify(res));
  client.close();
}
main();
