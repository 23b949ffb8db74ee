module local.invalid/olm-bench/resolver-driver

go 1.26.3

require github.com/operator-framework/operator-lifecycle-manager v0.46.0
