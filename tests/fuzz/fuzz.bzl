"""xferd_fuzz_target: one libFuzzer target and its corpus regression test."""

def xferd_fuzz_target(name, srcs, deps = []):
    """Declares `name` and `name_corpus_test`.

    `name` is the libFuzzer binary under --config=fuzz (clang,
    -fsanitize=fuzzer); in any other config it is a program that runs its
    arguments (files or directories) through the target once. It is tagged
    manual: `//...` builds it only through the corpus test.

    `name_corpus_test` runs every seed of corpus/<name>/ through the target,
    so `bazel test //...` and the sanitizer configs check the seeds on every
    run, and a crash found by fuzzing stays fixed once its input is a seed.
    """
    native.cc_binary(
        name = name,
        testonly = True,
        srcs = srcs,
        linkopts = select({
            "//tests/fuzz:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        deps = deps + select({
            "//tests/fuzz:fuzzing": [],
            "//conditions:default": ["//tests/fuzz:replay_main"],
        }),
        tags = ["manual", "fuzz_target"],
    )
    native.sh_test(
        name = name + "_corpus_test",
        size = "small",
        srcs = ["//tests/fuzz:corpus_test.sh"],
        # A parser on one thread: nothing for TSan to see (ASan replays it).
        tags = ["no_tsan"],
        args = [
            "$(location :%s)" % name,
            native.package_name() + "/corpus/" + name,
        ],
        data = [":" + name] + native.glob(["corpus/%s/**" % name]),
    )
