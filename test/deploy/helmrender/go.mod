// helmrender is built in GOPATH mode (GO111MODULE=off) against Debian's golang-*-dev packages;
// this go.mod is what lets its /v3 imports resolve to their paths there. The build command is
// in test/deploy/CMakeLists.txt.
module helmrender

go 1.19
