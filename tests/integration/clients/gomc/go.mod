module slabcache/tests/gomc

go 1.18

require github.com/bradfitz/gomemcache v0.0.0-20260422231931-4d751bb6e37c
