/*
 * layer_link.c -- an empty program. Makefile.am links it once per layer,
 * with the layer's whole library (--whole-archive: every object, used or
 * not) and only the libraries below it, so a call from a lower layer to a
 * higher one fails the build even where no test happens to pull in the
 * object that makes it.
 */
int
main(void)
{
    return 0;
}
