/* RTLD_NEXT check, library B: the wrapped definition. */
__attribute__((visibility("default"))) int gpushare_next_target(void) {
  return 2;
}
