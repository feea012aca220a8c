"""Factory provisioning: writes serial, BLE passkey and the device key into the OTP area.

Reads one row per device from the line's provisioning sheet (given on the command line).
"""
import csv, sys

def main(sheet):
    for row in csv.DictReader(open(sheet)):
        write_otp(row['serial'], row['ble_passkey'], bytes.fromhex(row['device_key']))

if __name__ == '__main__':
    main(sys.argv[1])
