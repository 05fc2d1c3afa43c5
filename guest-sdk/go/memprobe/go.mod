module spindle.dev/guest/memprobe

go 1.25

require spindle.dev/guest v0.0.0

replace spindle.dev/guest => ../
