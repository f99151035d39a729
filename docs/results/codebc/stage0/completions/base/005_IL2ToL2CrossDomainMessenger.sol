pragma solidity ^0.8.0;

interface IL2ToL2CrossDomainMessenger {
    string toL2L2CrossDomainMessenger(string message);
}