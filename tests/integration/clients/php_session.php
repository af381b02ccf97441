<?php
// PHP's memcached session handler with Debian's default ini (binary
// protocol, session locking): start a session, write it, start it again and
// read it back. Prints one JSON line; warnings (e.g. "Failed to write
// session lock") are collected into "errors".
//   php php_session.php PORT
$port = (int)$argv[1];
$errors = [];
set_error_handler(function ($no, $str) use (&$errors) { $errors[] = $str; return true; });
ini_set('session.save_handler', 'memcached');
ini_set('session.save_path', "127.0.0.1:$port");
ini_set('session.use_cookies', '0');
ini_set('session.use_only_cookies', '0');
ini_set('session.cache_limiter', '');
session_id('slabcache' . getmypid());
$ok1 = session_start();
$_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
$_SESSION['blob'] = str_repeat('x', 1000);
$w1 = session_write_close();
$ok2 = session_start();
$out = [
    'started' => $ok1 && $ok2,
    'written' => $w1,
    'n' => $_SESSION['n'] ?? null,
    'blob' => strlen($_SESSION['blob'] ?? ''),
    'binary_protocol' => ini_get('memcached.sess_binary_protocol'),
    'locking' => ini_get('memcached.sess_locking'),
];
$out['written2'] = session_write_close();
$out['errors'] = $errors;
echo json_encode($out), "\n";
