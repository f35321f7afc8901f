#include "testing.h"

int main(int argc, char **argv) { return tst_main(argc, argv); }
