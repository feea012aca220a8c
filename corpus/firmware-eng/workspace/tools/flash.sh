#!/bin/sh
# Flash a signed image over SWD with a J-Link.
set -e
IMG=${1:?image}
JLinkExe -device STM32G474RE -if SWD -speed 4000 -autoconnect 1 -CommanderScript /dev/stdin <<EOF
loadfile $IMG 0x08000000
r
g
exit
EOF
