module spindle.dev/examples/fetch

go 1.25

require spindle.dev/guest v0.0.0

replace spindle.dev/guest => ../../guest-sdk/go
