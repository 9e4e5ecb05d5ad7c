// The declaration in include/CFuzzDriver.h is all this target holds; libFuzzer defines it.
#include "CFuzzDriver.h"
