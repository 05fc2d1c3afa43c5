module spindle.dev/examples/greet

go 1.25

require spindle.dev/guest v0.0.0

replace spindle.dev/guest => ../../guest-sdk/go
