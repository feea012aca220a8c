#!/bin/sh
# Upload a signed image to the OTA bucket; credentials from ota.env next to this script.
set -e
. "$(dirname "$0")/ota.env"
curl -sf -u "$OTA_USER:$OTA_PASSWORD" -T "$1" "$OTA_URL/images/"
