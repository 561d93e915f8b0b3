module resourceslice-controller/test/cluster/testcluster

go 1.26.0
