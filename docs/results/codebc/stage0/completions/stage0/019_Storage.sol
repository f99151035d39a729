pragma solidity ^0.8.0;

library Storage {
    struct Storage {
        uint256 internal constant _UNIT_SLOT = 0x20;
        uint256 internal constant _UNIT_SLOT_SLOT = 0x40;
        uint256 internal constant _UNIT_SLOT_SLOT_SLOT = 0x60;
        uint256 internal constant _UNIT_SLOT_SLOT_SLOT_SLOT = 0x80;
        uint256 internal constant _UNIT_SLOT_SLOT_SLOT_SLOT_SLOT = 0x100;
        uint256 internal constant _UNIT_SLOT_SLOT_SLOT_SLOT_SLOT_SLOT_SLOT = 0x120;
        uint256 internal constant _UNIT_SLOT_SLOT_SLOT_SLOT_SLOT_SLOT_SLOT_SLOT_SLOT = 0x140;
        uint256 internal constant _UNIT_SLOT_SLOT_SLOT_SLOT_SLOT_SLOT_SLOT_SLOT_SLOT_SLOT_SLOT = 0x160;
        uint256 internal constant _UNIT_SLOT_SLOT_SLOT_SL