<?php
// php-memcached (libmemcached): store N keys with setMulti, read them back
// with one getMulti, compare every value, then list keys with getAllKeys.
//   php php_client.php PORT N KEYLEN
// Prints one JSON line: {"stored":..,"returned":..,"bad":..,"allkeys":..}
$port = (int)$argv[1];
$n = (int)($argv[2] ?? 10000);
$keylen = (int)($argv[3] ?? 200);
$binary = ($argv[4] ?? '') === 'binary';

function ckey($i, $keylen) {
    $k = sprintf("clients:%06d:", $i);
    return $k . str_repeat(chr(97 + $i % 26), $keylen - strlen($k));
}
function cvalue($i) {
    $len = 10 + ($i * 131) % 1000;
    $v = '';
    for ($j = 0; $j < $len; $j++) $v .= chr(33 + ($i * 7 + $j * 13) % 94);
    return $v;
}

$m = new Memcached();
$m->setOption(Memcached::OPT_COMPRESSION, false);
if ($binary) {
    $m->setOption(Memcached::OPT_BINARY_PROTOCOL, true);
}
$m->setOption(Memcached::OPT_CONNECT_TIMEOUT, 5000);
$m->setOption(Memcached::OPT_RECV_TIMEOUT, 10000000);
$m->setOption(Memcached::OPT_SEND_TIMEOUT, 10000000);
$m->addServer('127.0.0.1', $port);

$res = ['stored' => 0, 'returned' => 0, 'bad' => 0, 'badKeys' => [],
        'allkeys' => null, 'allkeys_missing' => null, 'allkeys_extra' => null,
        'errors' => []];
$keys = [];
$items = [];
for ($i = 0; $i < $n; $i++) {
    $keys[$i] = ckey($i, $keylen);
    $items[$keys[$i]] = cvalue($i);
}
foreach (array_chunk($items, 1000, true) as $chunk) {
    if ($m->setMulti($chunk)) {
        $res['stored'] += count($chunk);
    } else {
        $res['errors'][] = 'setMulti: ' . $m->getResultMessage();
    }
}
$got = $m->getMulti($keys);
if ($got === false) {
    $res['errors'][] = 'getMulti: ' . $m->getResultMessage();
    $got = [];
}
$res['returned'] = count($got);
foreach ($keys as $i => $k) {
    if (!array_key_exists($k, $got) || $got[$k] !== $items[$k]) {
        $res['bad']++;
        if (count($res['badKeys']) < 5) $res['badKeys'][] = $i;
    }
}
// libmemcached dumps keys over ASCII only: its binary mode refuses it
$all = $binary ? null : $m->getAllKeys();
if ($binary) {
    // nothing to list
} elseif ($all === false) {
    $res['errors'][] = 'getAllKeys: ' . $m->getResultMessage();
} else {
    $res['allkeys'] = count($all);
    $set = array_flip($all);
    $res['allkeys_missing'] = 0;
    foreach ($keys as $k) if (!isset($set[$k])) $res['allkeys_missing']++;
    $res['allkeys_extra'] = count(array_diff($all, $keys));
}
echo json_encode($res), "\n";
exit(($res['errors'] || $res['bad']) ? 1 : 0);
