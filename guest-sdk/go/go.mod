module spindle.dev/guest

go 1.25
