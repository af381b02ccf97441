// Node "memcached" npm client: store N keys, read them back with one
// getMulti, compare every value, then ask version().
//   NODE_PATH=<cache>/node_modules node node_client.js PORT N KEYLEN
// Prints one JSON line: {"stored":..,"returned":..,"bad":..,"version":..}
'use strict';
const Memcached = require('memcached');

const port = process.argv[2];
const n = parseInt(process.argv[3] || '10000', 10);
const keylen = parseInt(process.argv[4] || '200', 10);

function key(i) {
  const k = 'clients:' + String(i).padStart(6, '0') + ':';
  return k + String.fromCharCode(97 + (i % 26)).repeat(keylen - k.length);
}

function value(i) {
  const len = 10 + (i * 131) % 1000;
  const out = new Array(len);
  for (let j = 0; j < len; j++) out[j] = String.fromCharCode(33 + (i * 7 + j * 13) % 94);
  return out.join('');
}

const mc = new Memcached('127.0.0.1:' + port, {
  timeout: 10000, poolSize: 4, idle: 30000, retries: 5, minTimeout: 50,
  maxTimeout: 1000,
});
const result = {stored: 0, returned: 0, bad: 0, badKeys: [], version: null, errors: []};

function finish(code) {
  try { mc.end(); } catch (e) { /* ignore */ }
  result.errors = result.errors.slice(0, 20);
  // exit only once the line is flushed (a pipe write is asynchronous)
  process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(code));
}

setTimeout(() => { result.errors.push('timeout'); finish(2); }, 60000).unref();

const keys = [];
for (let i = 0; i < n; i++) keys.push(key(i));

// sets: a window of 4 in flight (one per pooled connection)
let next = 0, done = 0;
function setOne() {
  if (next >= n) return;
  const i = next++;
  mc.set(keys[i], value(i), 0, (err, ok) => {
    if (err || ok !== true) result.errors.push('set ' + i + ': ' + String(err || ok));
    else result.stored++;
    if (++done === n) getAll(); else setOne();
  });
}

function getAll() {
  mc.getMulti(keys, (err, data) => {
    if (err) result.errors.push('getMulti: ' + String(err));
    data = data || {};
    result.returned = Object.keys(data).length;
    for (let i = 0; i < n; i++) {
      if (data[keys[i]] !== value(i)) {
        result.bad++;
        if (result.badKeys.length < 5) result.badKeys.push(i);
      }
    }
    mc.version((verr, v) => {
      if (verr) result.errors.push('version: ' + String(verr));
      result.version = v && v[0] ? v[0].version : null;
      finish(result.errors.length || result.bad ? 1 : 0);
    });
  });
}

for (let w = 0; w < 4; w++) setOne();
