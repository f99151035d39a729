pragma solidity ^0.8.4;

library LibBytes {
    struct {
        uint8_t *buffer;
    } buffer;
}