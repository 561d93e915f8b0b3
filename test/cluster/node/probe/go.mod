module resourceslice-controller/test/cluster/node/probe

go 1.26.0
