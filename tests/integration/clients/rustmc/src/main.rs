// The Rust `memcache` crate against a server, over its default (binary)
// protocol: set N keys, read them back one by one and in one multi-get,
// increment, delete, flush. Prints one line per check: "ok NAME" or
// "FAIL NAME: detail"; exits 1 on any failure.
//   rustmc PORT N
use std::collections::HashMap;

fn value(i: usize) -> String {
    (0..(10 + i * 131 % 1000)).map(|j| (33 + (i * 7 + j * 13) % 94) as u8 as char).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port: u16 = args[1].parse().unwrap();
    let n: usize = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(1000);
    let url = format!("memcache://127.0.0.1:{}?timeout=10", port);
    let client = memcache::connect(url.as_str()).expect("connect");
    let mut fails = 0;
    let mut check = |name: &str, ok: bool, detail: String| {
        if ok {
            println!("ok {}", name);
        } else {
            println!("FAIL {}: {}", name, detail);
            fails += 1;
        }
    };
    let keys: Vec<String> = (0..n).map(|i| format!("rust:{:06}", i)).collect();
    let mut set_errors = 0;
    for (i, k) in keys.iter().enumerate() {
        if client.set(k.as_str(), value(i).as_str(), 0).is_err() {
            set_errors += 1;
        }
    }
    check("set", set_errors == 0, format!("{} errors", set_errors));
    let mut bad = 0;
    for (i, k) in keys.iter().enumerate().take(100) {
        let v: Option<String> = client.get(k.as_str()).unwrap_or(None);
        if v.as_deref() != Some(value(i).as_str()) {
            bad += 1;
        }
    }
    check("get", bad == 0, format!("{} wrong", bad));
    let refs: Vec<&str> = keys.iter().map(|s| s.as_str()).collect();
    let got: HashMap<String, String> = client.gets(&refs).unwrap_or_default();
    let wrong = keys.iter().enumerate()
        .filter(|(i, k)| got.get(*k).map(|v| v.as_str()) != Some(value(*i).as_str()))
        .count();
    check("gets", got.len() == n && wrong == 0, format!("{} returned, {} wrong", got.len(), wrong));
    let _ = client.set("rust:counter", 10u64, 0);
    let inc = client.increment("rust:counter", 5);
    check("increment", matches!(inc, Ok(15)), format!("{:?}", inc));
    let del = client.delete(keys[0].as_str());
    let gone: Option<String> = client.get(keys[0].as_str()).unwrap_or(None);
    check("delete", matches!(del, Ok(true)) && gone.is_none(), format!("{:?} {:?}", del, gone));
    let ver = client.version();
    check("version", ver.as_ref().map(|v| v.iter().all(|(_, s)| s == "1.6.45")).unwrap_or(false),
          format!("{:?}", ver));
    let fl = client.flush();
    let after: Option<String> = client.get(keys[1].as_str()).unwrap_or(None);
    check("flush", fl.is_ok() && after.is_none(), format!("{:?} {:?}", fl, after));
    std::process::exit(if fails == 0 { 0 } else { 1 });
}
