// Compiles the precompiled header every test reuses (CMakeLists.txt, collscope_test); it holds no
// test of its own.
