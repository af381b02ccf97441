// gomc: store N keys with github.com/bradfitz/gomemcache, read them back
// with one GetMulti and compare every value byte for byte.
//
//	gomc -addr 127.0.0.1:PORT -n 10000 -keylen 200
//
// Keys and values follow the scheme shared by all client helpers
// (see test_clients.py: ckey/cvalue). Prints "OK <n>" on success.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
)

func key(i, keylen int) string {
	k := fmt.Sprintf("clients:%06d:", i)
	return k + strings.Repeat(string(rune('a'+i%26)), keylen-len(k))
}

func value(i int) []byte {
	n := 10 + (i*131)%1000
	v := make([]byte, n)
	for j := 0; j < n; j++ {
		v[j] = byte(33 + (i*7+j*13)%94)
	}
	return v
}

func main() {
	addr := flag.String("addr", "127.0.0.1:11211", "server address")
	n := flag.Int("n", 10000, "number of keys")
	keylen := flag.Int("keylen", 200, "key length")
	flag.Parse()

	mc := memcache.New(*addr)
	mc.Timeout = 10 * time.Second
	mc.MaxIdleConns = 8

	keys := make([]string, *n)
	for i := range keys {
		keys[i] = key(i, *keylen)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < *n; i += 8 {
				it := &memcache.Item{Key: keys[i], Value: value(i), Flags: uint32(i % 7)}
				if err := mc.Set(it); err != nil {
					errs <- fmt.Errorf("set %d: %v", i, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		fmt.Println("FAIL", err)
		os.Exit(1)
	}

	got, err := mc.GetMulti(keys)
	if err != nil {
		fmt.Println("FAIL GetMulti:", err)
		os.Exit(1)
	}
	bad := 0
	for i, k := range keys {
		it, ok := got[k]
		switch {
		case !ok:
			if bad < 5 {
				fmt.Printf("missing key %d\n", i)
			}
			bad++
		case !bytes.Equal(it.Value, value(i)):
			if bad < 5 {
				fmt.Printf("key %d: value differs (len %d, want %d)\n", i, len(it.Value), len(value(i)))
			}
			bad++
		case it.Flags != uint32(i%7):
			if bad < 5 {
				fmt.Printf("key %d: flags %d, want %d\n", i, it.Flags, i%7)
			}
			bad++
		}
	}
	if bad > 0 || len(got) != *n {
		fmt.Printf("FAIL %d bad of %d, %d returned\n", bad, *n, len(got))
		os.Exit(1)
	}
	fmt.Printf("OK %d\n", len(got))
}
