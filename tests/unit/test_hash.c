/*
 * test_hash.c -- unit tests for include/util/hash.h: CRC-32C against its
 * published check value, chaining over split buffers, and the hardware
 * and table versions agreeing on every length and alignment (the flash
 * tier writes with one and may read on a CPU that has the other).
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

START_TEST(test_crc32c_check_value)
{
    /* The CRC catalogue's check value for CRC-32C (iSCSI, RFC 3720). */
    ck_assert_uint_eq(hash_crc32c(0, "123456789", 9), 0xe3069283u);
    ck_assert_uint_eq(hash_crc32c_sw(0, "123456789", 9), 0xe3069283u);
    ck_assert_uint_eq(hash_crc32c(0, "", 0), 0);
}
END_TEST

START_TEST(test_crc32c_chains)
{
    char buf[4096];
    for (size_t i = 0; i < sizeof(buf); i++) {
        buf[i] = (char)(i * 131 + 7);
    }
    uint32_t whole = hash_crc32c(0, buf, sizeof(buf));
    for (size_t cut = 0; cut <= sizeof(buf); cut += 97) {
        uint32_t c = hash_crc32c(0, buf, cut);
        ck_assert_uint_eq(hash_crc32c(c, buf + cut, sizeof(buf) - cut), whole);
    }
    buf[1234] ^= 1;
    ck_assert_uint_ne(hash_crc32c(0, buf, sizeof(buf)), whole);
}
END_TEST

START_TEST(test_crc32c_versions_agree)
{
    unsigned char buf[300];
    srand(7);
    for (size_t i = 0; i < sizeof(buf); i++) {
        buf[i] = (unsigned char)rand();
    }
    for (size_t off = 0; off < 8; off++) {
        for (size_t n = 0; off + n <= sizeof(buf); n += 1 + n / 16) {
            ck_assert_uint_eq(hash_crc32c(0x5f1a5ca1u, buf + off, n),
                              hash_crc32c_sw(0x5f1a5ca1u, buf + off, n));
        }
    }
}
END_TEST

static Suite *
hash_suite(void)
{
    Suite *s = suite_create("hash");
    TCase *tc = tcase_create("crc32c");

    tcase_add_test(tc, test_crc32c_check_value);
    tcase_add_test(tc, test_crc32c_chains);
    tcase_add_test(tc, test_crc32c_versions_agree);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(hash_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
