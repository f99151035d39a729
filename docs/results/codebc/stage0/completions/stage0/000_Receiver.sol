pragma solidity ^0.8.4;

abstract contract Receiver {
    uint256 _address;
    uint256 _port;
    uint256 _id;
    uint256 _idOfReceiver;
    uint256 _idOfReceiverOfReceiver;
    uint256 _idOfReceiverOfReceiverOfReceiver;
    uint256 _idOfReceiverOfReceiverOfReceiverOfReceiver;
    uint256 _idOfReceiverOfReceiverOfReceiverOfReceiverOfReceiver;
    uint256 _idOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiver;
    uint256 _idOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiver;
    uint256 _idOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfReceiverOfRe