/*
 * test_settings.c -- unit tests for command line parsing (settings.h).
 *
 * settings_parse() prints usage and error messages; each test's process
 * sends stdout and stderr to /dev/null while it runs.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "settings.h"

static int saved_out = -1, saved_err = -1;

static void
quiet(void)
{
    int null = open("/dev/null", O_WRONLY);

    ck_assert_int_ge(null, 0);
    fflush(stdout);
    fflush(stderr);
    saved_out = dup(STDOUT_FILENO);
    saved_err = dup(STDERR_FILENO);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    close(null);
    settings_defaults();
}

static void
loud(void)
{
    fflush(stdout);
    fflush(stderr);
    if (saved_out >= 0) {
        dup2(saved_out, STDOUT_FILENO);
        close(saved_out);
    }
    if (saved_err >= 0) {
        dup2(saved_err, STDERR_FILENO);
        close(saved_err);
    }
    saved_out = saved_err = -1;
}

/* Parse a NULL-terminated list of arguments after a program name,
 * starting from defaults. The array is copied: getopt permutes it. */
static settings_rstatus_t
parse_list(const char *const *args)
{
    static char *argv[64];
    int argc = 0;

    argv[argc++] = (char *)"slabcache";
    for (; *args != NULL; args++) {
        ck_assert_int_lt(argc, 63);
        argv[argc++] = (char *)*args;
    }
    argv[argc] = NULL;
    settings_defaults();
    return settings_parse(argc, argv);
}

#define PARSE(...) parse_list((const char *const[]){ __VA_ARGS__, NULL })
#define PARSE0()   parse_list((const char *const[]){ NULL })

/* --- defaults ----------------------------------------------------------------- */

static void
assert_defaults(void)
{
    ck_assert_int_eq(settings.port, 11211);
    ck_assert_str_eq(settings.listen_addr, "127.0.0.1");
    ck_assert_int_eq(settings.udp_port, 0);
    ck_assert_ptr_null(settings.socket_path);
    ck_assert_int_eq(settings.socket_mask, 0700);
    ck_assert_int_eq(settings.memory_mb, 64);
    ck_assert(!settings.no_evict);
    ck_assert_int_eq(settings.max_conns, 1024);
    ck_assert_int_eq(settings.threads, 4);
    ck_assert_int_eq(settings.item_size_max, 1048576);
    ck_assert_double_eq(settings.factor, 1.25);
    ck_assert_int_eq(settings.chunk_min, 48);
    ck_assert(!settings.cas_disabled);
    ck_assert_int_eq(settings.reqs_per_event, 20);
    ck_assert_int_eq(settings.backlog, 1024);
    ck_assert(!settings.shutdown_ok);
    ck_assert(!settings.daemonize);
    ck_assert_ptr_null(settings.pid_file);
    ck_assert_ptr_null(settings.user);
    ck_assert_int_eq(settings.verbose, 0);
    ck_assert_ptr_null(settings.extended);
    ck_assert_str_eq(settings.eviction, "auto");
    ck_assert_uint_eq(settings.maxbytes, (size_t)64 * 1024 * 1024);
    ck_assert_uint_eq(settings.hashpower, 16);
}

START_TEST(test_defaults)
{
    memset(&settings, 0x5a, sizeof(settings));
    settings_defaults();
    assert_defaults();
}
END_TEST

START_TEST(test_no_arguments)
{
    ck_assert_int_eq(PARSE0(), SETTINGS_OK);
    assert_defaults();
}
END_TEST

/* --- valid options ----------------------------------------------------------------- */

START_TEST(test_short_options)
{
    ck_assert_int_eq(PARSE("-p", "12345", "-m", "128", "-t", "8", "-c", "2000",
                           "-I", "512k", "-f", "1.5", "-n", "64", "-C", "-M", "-A",
                           "-R", "50", "-b", "512", "-v", "-U", "0", "-l", "0.0.0.0",
                           "-a", "0644", "-d", "-P", "/tmp/sc.pid", "-u", "nobody"),
                     SETTINGS_OK);
    ck_assert_int_eq(settings.port, 12345);
    ck_assert_int_eq(settings.memory_mb, 128);
    ck_assert_uint_eq(settings.maxbytes, (size_t)128 * 1024 * 1024);
    ck_assert_int_eq(settings.threads, 8);
    ck_assert_int_eq(settings.max_conns, 2000);
    ck_assert_int_eq(settings.item_size_max, 524288);
    ck_assert_double_eq(settings.factor, 1.5);
    ck_assert_int_eq(settings.chunk_min, 64);
    ck_assert(settings.cas_disabled);
    ck_assert(settings.no_evict);
    ck_assert(settings.shutdown_ok);
    ck_assert_int_eq(settings.reqs_per_event, 50);
    ck_assert_int_eq(settings.backlog, 512);
    ck_assert_int_eq(settings.verbose, 1);
    ck_assert_int_eq(settings.udp_port, 0);
    ck_assert_str_eq(settings.listen_addr, "0.0.0.0");
    ck_assert_int_eq(settings.socket_mask, 0644);
    ck_assert(settings.daemonize);
    ck_assert_str_eq(settings.pid_file, "/tmp/sc.pid");
    ck_assert_str_eq(settings.user, "nobody");
    /* untouched ones keep their defaults */
    ck_assert_str_eq(settings.eviction, "auto");
    ck_assert_uint_eq(settings.hashpower, 16);
}
END_TEST

START_TEST(test_attached_and_grouped)
{
    ck_assert_int_eq(PARSE("-p12345", "-t2", "-CMA"), SETTINGS_OK);
    ck_assert_int_eq(settings.port, 12345);
    ck_assert_int_eq(settings.threads, 2);
    ck_assert(settings.cas_disabled);
    ck_assert(settings.no_evict);
    ck_assert(settings.shutdown_ok);
    /* last one wins */
    ck_assert_int_eq(PARSE("-p", "1", "-p", "2"), SETTINGS_OK);
    ck_assert_int_eq(settings.port, 2);
}
END_TEST

START_TEST(test_item_size_suffixes)
{
    ck_assert_int_eq(PARSE("-I", "2m"), SETTINGS_OK);
    ck_assert_int_eq(settings.item_size_max, 2 * 1024 * 1024);
    ck_assert_int_eq(PARSE("-I", "2M"), SETTINGS_OK);
    ck_assert_int_eq(settings.item_size_max, 2 * 1024 * 1024);
    ck_assert_int_eq(PARSE("-I", "512k"), SETTINGS_OK);
    ck_assert_int_eq(settings.item_size_max, 512 * 1024);
    ck_assert_int_eq(PARSE("-I", "4096"), SETTINGS_OK);
    ck_assert_int_eq(settings.item_size_max, 4096);
    ck_assert_int_eq(PARSE("-I", "1k"), SETTINGS_OK);
    ck_assert_int_eq(settings.item_size_max, 1024);
    ck_assert_int_eq(PARSE("-m", "4096", "-I", "1g"), SETTINGS_OK);
    ck_assert_int_eq(settings.item_size_max, 1024L * 1024 * 1024);
    ck_assert_int_eq(PARSE("-m", "2", "-I", "1m"), SETTINGS_OK);   /* exactly half */
    ck_assert_int_eq(settings.item_size_max, 1024 * 1024);
}
END_TEST

START_TEST(test_verbose_count)
{
    ck_assert_int_eq(PARSE("-v"), SETTINGS_OK);
    ck_assert_int_eq(settings.verbose, 1);
    ck_assert_int_eq(PARSE("-vv"), SETTINGS_OK);
    ck_assert_int_eq(settings.verbose, 2);
    ck_assert_int_eq(PARSE("-v", "-vv"), SETTINGS_OK);
    ck_assert_int_eq(settings.verbose, 2);
    ck_assert_int_eq(PARSE("-vvvv"), SETTINGS_OK);
    ck_assert_int_eq(settings.verbose, 2);
    ck_assert_int_eq(PARSE("--verbose", "--verbose"), SETTINGS_OK);
    ck_assert_int_eq(settings.verbose, 2);
}
END_TEST

START_TEST(test_long_options)
{
    ck_assert_int_eq(PARSE("--port=4321", "--memory-limit=256", "--threads=16",
                           "--max-item-size=2m", "--eviction=lru", "--conn-limit=99",
                           "--slab-growth-factor=2.5", "--slab-min-size=100",
                           "--disable-cas", "--disable-evictions", "--enable-shutdown",
                           "--listen=10.0.0.1", "--max-reqs-per-event=7",
                           "--listen-backlog=64", "--unix-mask=0600"),
                     SETTINGS_OK);
    ck_assert_int_eq(settings.port, 4321);
    ck_assert_int_eq(settings.memory_mb, 256);
    ck_assert_uint_eq(settings.maxbytes, (size_t)256 * 1024 * 1024);
    ck_assert_int_eq(settings.threads, 16);
    ck_assert_int_eq(settings.item_size_max, 2 * 1024 * 1024);
    ck_assert_str_eq(settings.eviction, "lru");
    ck_assert_int_eq(settings.max_conns, 99);
    ck_assert_double_eq(settings.factor, 2.5);
    ck_assert_int_eq(settings.chunk_min, 100);
    ck_assert(settings.cas_disabled);
    ck_assert(settings.no_evict);
    ck_assert(settings.shutdown_ok);
    ck_assert_str_eq(settings.listen_addr, "10.0.0.1");
    ck_assert_int_eq(settings.reqs_per_event, 7);
    ck_assert_int_eq(settings.backlog, 64);
    ck_assert_int_eq(settings.socket_mask, 0600);

    /* separate argument form and other values */
    ck_assert_int_eq(PARSE("--port", "999", "--eviction", "none", "--unix-socket",
                           "/tmp/sc.sock"), SETTINGS_OK);
    ck_assert_int_eq(settings.port, 999);
    ck_assert_str_eq(settings.eviction, "none");
    ck_assert_str_eq(settings.socket_path, "/tmp/sc.sock");
}
END_TEST

START_TEST(test_range_edges)
{
    ck_assert_int_eq(PARSE("-p", "0"), SETTINGS_OK);
    ck_assert_int_eq(settings.port, 0);
    ck_assert_int_eq(PARSE("-p", "65535"), SETTINGS_OK);
    ck_assert_int_eq(settings.port, 65535);
    ck_assert_int_eq(PARSE("-t", "1"), SETTINGS_OK);
    ck_assert_int_eq(settings.threads, 1);
    ck_assert_int_eq(PARSE("-t", "64"), SETTINGS_OK);
    ck_assert_int_eq(settings.threads, 64);
    ck_assert_int_eq(PARSE("-f", "1.01"), SETTINGS_OK);
    ck_assert_double_eq(settings.factor, 1.01);
}
END_TEST

/* -1: any free port. memcached's rule: -U alone moves the TCP port to it. */
START_TEST(test_ports)
{
    ck_assert_int_eq(PARSE("-p", "-1"), SETTINGS_OK);
    ck_assert_int_eq(settings.port, -1);
    ck_assert_int_eq(PARSE("-U", "-1"), SETTINGS_OK);
    ck_assert_int_eq(settings.udp_port, -1);
    ck_assert_int_eq(settings.port, -1);
    ck_assert_int_eq(PARSE("-U", "11222"), SETTINGS_OK);
    ck_assert_int_eq(settings.port, 11222);
    ck_assert_int_eq(PARSE("-U", "11222", "-p", "5"), SETTINGS_OK);
    ck_assert_int_eq(settings.port, 5);
    ck_assert_int_eq(PARSE("-p", "5", "-U", "11222"), SETTINGS_OK);
    ck_assert_int_eq(settings.port, 5);
    ck_assert_int_eq(PARSE("-U", "0"), SETTINGS_OK);
    ck_assert_int_eq(settings.port, 11211);
}
END_TEST

START_TEST(test_extended_options)
{
    ck_assert_int_eq(PARSE("-o", "hashpower=20"), SETTINGS_OK);
    ck_assert_uint_eq(settings.hashpower, 20);
    ck_assert_int_eq(PARSE("-o", "slab_reassign"), SETTINGS_OK);
    ck_assert_uint_eq(settings.hashpower, 16);
    ck_assert_int_eq(PARSE("-o", "slab_reassign,hashpower=18,slab_automove=1"), SETTINGS_OK);
    ck_assert_uint_eq(settings.hashpower, 18);
    ck_assert_int_eq(PARSE("--extended=hashpower=12"), SETTINGS_OK);
    ck_assert_uint_eq(settings.hashpower, 12);
    ck_assert_int_eq(PARSE("-o", "hashpower=32"), SETTINGS_OK);
    ck_assert_uint_eq(settings.hashpower, 32);
    /* -o given twice: both lists apply, as memcached takes them */
    ck_assert_int_eq(PARSE("-o", "hashpower=20", "-o", "bg_evict=1,ssl_key=k"), SETTINGS_OK);
    ck_assert_uint_eq(settings.hashpower, 20);
    ck_assert(settings.bg_evict);
    ck_assert_str_eq(settings.ssl_key, "k");
#ifdef HAVE_SASL
    /* -S refuses an explicit -B other than binary, as memcached */
    ck_assert_int_eq(PARSE("-S", "-B", "auto"), SETTINGS_USAGE);
    ck_assert_int_eq(PARSE("-S", "-B", "binary"), SETTINGS_OK);
    ck_assert(settings.binary_only);
#endif

    ck_assert_int_eq(PARSE("-o", "hashpower=11"), SETTINGS_USAGE);
    ck_assert_int_eq(PARSE("-o", "hashpower=33"), SETTINGS_USAGE);
    ck_assert_int_eq(PARSE("-o", "hashpower=abc"), SETTINGS_USAGE);
    ck_assert_int_eq(PARSE("-o", "hashpower="), SETTINGS_USAGE);
    ck_assert_int_eq(PARSE("-o", "hashpower"), SETTINGS_USAGE);
    ck_assert_int_eq(PARSE("-o", "bogus"), SETTINGS_USAGE);
    ck_assert_int_eq(PARSE("-o", "slab_reassign,bogus=1"), SETTINGS_USAGE);
    ck_assert_int_eq(PARSE("-o", "slab_reassignx"), SETTINGS_USAGE);
}
END_TEST

/* --- invalid ------------------------------------------------------------------------ */

START_TEST(test_invalid_values)
{
    static const char *const bad[][5] = {
        { "-p", "70000" }, { "-p", "-2" }, { "-p", "abc" }, { "-p", "" },
        { "-p", "80x" }, { "-t", "0" }, { "-t", "65" }, { "-t", "abc" },
        { "-t", "4.5" }, { "-f", "1.0" }, { "-f", "1" }, { "-f", "abc" },
        { "-f", "0.5" }, { "-f", "" }, { "-f", "1.5x" }, { "-I", "10x" },
        { "-I", "1000" }, { "-I", "" }, { "-I", "k" }, { "-I", "-1m" },
        { "-m", "0" }, { "-m", "abc" }, { "-c", "0" }, { "-n", "0" },
        { "-R", "0" }, { "-b", "0" }, { "-a", "999" }, { "-a", "01000" },
        { "-U", "65536" }, { "-U", "-2" }, { "-l", "" }, { "--eviction=" },
        { "--port=70000" }, { "--threads=0" }, { "--max-item-size=10x" },
        { "-m", "1" },                              /* default -I 1m > 512k */
        { "-m", "8", "-I", "8m" }, { "-m", "2", "-I", "1025k" },
        { "-I", "1024", "-n", "512" },              /* -n >= half of -I */
        { "-q" }, { "--bogus" }, { "--port" }, { "-p" }, { "extra" },
        { "-p", "1", "stray" }, { "-o", "bogus" },
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        settings_rstatus_t st = parse_list(bad[i]);
        ck_assert_msg(st == SETTINGS_USAGE, "case %zu '%s %s' -> %d, want USAGE", i,
                      bad[i][0], bad[i][1] ? bad[i][1] : "", (int)st);
    }
}
END_TEST

START_TEST(test_help_version)
{
    ck_assert_int_eq(PARSE("-h"), SETTINGS_EXIT_OK);
    ck_assert_int_eq(PARSE("--help"), SETTINGS_EXIT_OK);
    ck_assert_int_eq(PARSE("-V"), SETTINGS_EXIT_OK);
    ck_assert_int_eq(PARSE("--version"), SETTINGS_EXIT_OK);
    ck_assert_int_eq(PARSE("-p", "1", "-h"), SETTINGS_EXIT_OK);
    /* a fresh parse afterwards is unaffected */
    ck_assert_int_eq(PARSE("-p", "1234"), SETTINGS_OK);
    ck_assert_int_eq(settings.port, 1234);
}
END_TEST

/*
 * settings_parse() resets getopt itself, so parsing one argv must not
 * leak into the next. After an early return from the middle of a group
 * of short options ("-hv": returns at 'h'), glibc's getopt still points
 * at the rest of the old group unless it is reinitialised with
 * optind = 0; with optind = 1 the next parse first consumes the stale
 * 'v' and then skips its own argv[1].
 */
START_TEST(test_reparse_after_grouped_early_return)
{
    ck_assert_int_eq(PARSE("-hv"), SETTINGS_EXIT_OK);
    ck_assert_int_eq(PARSE("-p", "1234"), SETTINGS_OK);
    ck_assert_int_eq(settings.port, 1234);
    ck_assert_int_eq(settings.verbose, 0);

    ck_assert_int_eq(PARSE("-VC"), SETTINGS_EXIT_OK);
    ck_assert_int_eq(PARSE("-t", "3"), SETTINGS_OK);
    ck_assert_int_eq(settings.threads, 3);
    ck_assert(!settings.cas_disabled);
}
END_TEST

START_TEST(test_reparse_after_error)
{
    ck_assert_int_eq(PARSE("-p", "70000"), SETTINGS_USAGE);
    ck_assert_int_eq(PARSE("-t", "2"), SETTINGS_OK);
    ck_assert_int_eq(settings.threads, 2);
    ck_assert_int_eq(settings.port, 11211);
    ck_assert_int_eq(PARSE("-Cx"), SETTINGS_USAGE);
    ck_assert_int_eq(PARSE("-m", "32"), SETTINGS_OK);
    ck_assert_int_eq(settings.memory_mb, 32);
    ck_assert(!settings.cas_disabled);
}
END_TEST

static Suite *
settings_suite(void)
{
    Suite *s = suite_create("settings");
    TCase *tc = tcase_create("parse");

    tcase_add_checked_fixture(tc, quiet, loud);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_no_arguments);
    tcase_add_test(tc, test_short_options);
    tcase_add_test(tc, test_attached_and_grouped);
    tcase_add_test(tc, test_item_size_suffixes);
    tcase_add_test(tc, test_verbose_count);
    tcase_add_test(tc, test_long_options);
    tcase_add_test(tc, test_range_edges);
    tcase_add_test(tc, test_ports);
    tcase_add_test(tc, test_extended_options);
    tcase_add_test(tc, test_invalid_values);
    tcase_add_test(tc, test_help_version);
    tcase_add_test(tc, test_reparse_after_grouped_early_return);
    tcase_add_test(tc, test_reparse_after_error);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(settings_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
