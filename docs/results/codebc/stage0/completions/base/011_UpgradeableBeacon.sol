pragma solidity ^0.8.4;

contract UpgradeableBeacon {
    public static enum UpgradeableBeaconType {
        UpgradeableBeaconType_None = 0x00000000,
        UpgradeableBeaconType_Bluetooth = 0x0001,
        UpgradeableBeaconType_Bluetooth_A118_128_8000 = 0x0002,
        UpgradeableBeaconType_Bluetooth_A118_128_128_8000 = 0x0004,
        UpgradeableBeaconType_Bluetooth_A118_128_128_128_8000 = 0x0008,
        UpgradeableBeaconType_Bluetooth_A118_128_128_128_128_8000 = 0x0010,
        UpgradeableBeaconType_Bluetooth_A118_128_128_128_128_128_8000 = 0x0100,
        UpgradeableBeaconType_Bluetooth_A118_128_128_128_128_128_