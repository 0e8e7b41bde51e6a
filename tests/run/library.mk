# library.mk - builds the object files of zfolio's library sources (SRC: the source tree),
# a C code base for zfolio run's tests (run_test.sh make) and bench/run_vs_cgroup.sh:
# make -j2 -f library.mk SRC=/path/to/zfolio, in the directory the objects go to.
SRCS := $(wildcard $(addsuffix /*.c,$(addprefix $(SRC)/src/,common zpool engine backing store region group)))
all: $(patsubst %.c,%.o,$(notdir $(SRCS)))
vpath %.c $(sort $(dir $(SRCS)))
%.o: %.c
	$(CC) -O2 -D_GNU_SOURCE -I$(SRC)/include -I$(SRC)/src -c $< -o $@
